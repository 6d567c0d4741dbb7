"""The basics every layer stands on: errors, small shared records, the simulation clock and its seeded
streams, agent names, input-file reading and secret redaction. No module here imports another part of
meshsim (only ``errors`` from this package)."""
