"""Tests of the broker server package."""
