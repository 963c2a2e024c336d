"""The Spark side: sessions, window core, detector, batch runner and compute."""
