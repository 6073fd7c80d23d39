"""Call paths and head-count tracing: every call of a probed FlashInfer entry,
the keywords it passes, and the head count it hands over, followed through
the engine's own code. Imports tree/ and interpreter/ only."""
