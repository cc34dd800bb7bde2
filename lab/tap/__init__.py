"""The CDP tap: counts every CDP call per client connection × target × method. Imports nothing it measures."""

from lab.tap.classify import CATEGORIES, classify
from lab.tap.proxy import CDPTap, ChromiumGone, Incident, Record, Sighting
from lab.tap.sessions import BROWSER

__all__ = ["BROWSER", "CATEGORIES", "CDPTap", "ChromiumGone", "Incident", "Record", "Sighting", "classify"]
