"""CIR -> CIR passes and the analyses that schedules ask (`recognise`: structural patterns)."""
