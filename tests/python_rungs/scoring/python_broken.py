"""A rung module that cannot be imported: `kstudy list` names it, and every other rung still registers."""

import kstudy_test_no_such_module  # noqa: F401
