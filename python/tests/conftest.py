"""The package's own suite runs on an installed wheel (python/run.sh). The
pytester plugin runs inner pytest sessions for the plugin's own tests."""

pytest_plugins = ["pytester"]
