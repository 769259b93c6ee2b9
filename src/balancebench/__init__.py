"""balancebench."""
