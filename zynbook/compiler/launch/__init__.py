"""The launch IR (ir.py), its text form for the inspector and its CPU emulator."""
