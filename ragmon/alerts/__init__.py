"""``ragmon alerts``: the alerts measured as a whole (docs/alerts.md).

Modules:

- ``command``   ``ragmon alerts simulate``: arguments, the run, the report files
- ``pools``     labelled rows scored once by the judge (cached), drawn from by label and group
- ``traffic``   one simulated pipeline: requests, the agent's sampling, judged rows, counters
- ``latency``   one simulated pipeline's retrieval latency histogram (the latency alerts)
- ``cases``     stationary traffic, steps of the failing share, a slow drift
- ``runner``    cases x runs x pipelines, one promtool test per case
- ``promtool``  Prometheus's rule engine over the simulated counters; the ALERTS history read back
- ``report``    false pages per 30 days, time to page, every alert of the rules file, the Markdown table
- ``level``     the exact level of the drop alerts' rise test on small counts (binomial sums)
"""
