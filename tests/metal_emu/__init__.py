"""A CPU model of Metal for checking ZynBook's generated MSL without a Mac (see docs/metal.md)."""
