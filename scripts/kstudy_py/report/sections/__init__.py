"""The report's sections, one module each; every module registers its own (see kstudy_py.report)."""
