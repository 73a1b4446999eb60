"""A plugin module (loaded by test_registry.py through an entry point) that calls
``sys.exit()`` while it is imported."""

import sys

sys.exit("plugin refuses")
