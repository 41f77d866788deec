"""Sections for the `scoring` operation only (standardize, clip, weight, row sum, threshold): its layouts,
its transfers' decomposition and the seed article's claims about it."""
