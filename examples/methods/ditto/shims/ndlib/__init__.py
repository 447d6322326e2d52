"""Import-only stand-in for ndlib (DITTO pins 5.1.1). DITTO imports it at start-up but uses it only
to simulate a dataset that is missing from its input folder, which never happens under
run_ditto.py: the history is always given. Any use raises."""
