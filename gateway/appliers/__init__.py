"""The dispatcher and the built-in appliers (see the applier framework issue)."""
