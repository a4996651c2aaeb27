#!/usr/bin/env bash
# Real Apache Kafka (KRaft, single node) for tests/CI/benchmarks; see scripts/kafka_broker.py.
#   scripts/kafka-broker.sh fetch            # resolve the jars with Maven into $RAGMON_KAFKA_HOME
#   scripts/kafka-broker.sh run --port 9092  # foreground broker
set -euo pipefail
exec python3 "$(dirname "$0")/kafka_broker.py" "$@"
