"""The stream node process: Spark Connect for everyone, and the host of the live window detectors."""
