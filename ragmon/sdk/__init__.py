"""The part of ragmon that runs inside the user's process."""
