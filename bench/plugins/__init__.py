"""Plugins: modules that register extra methods, datasets, launchers, tables or trackers."""
