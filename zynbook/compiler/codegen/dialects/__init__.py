"""Dialects of the one printer (codegen/printer.py): how each language spells the launch IR.

A dialect is text only: types, literals, math, thread indices, barriers, collectives, the
checks of the error flag, kernel signatures and the program around the kernels. It never
chooses a schedule, a size or a type; those are in the launch IR it is given.
"""
