"""`RunConfigFields`: `RunConfig`'s fields for a type checker, and nothing at run time.

``RunConfig`` gets its fields from the flag table (run_config.py), which a type checker cannot
read; fields.pyi beside this module, generated from the table (loadgen/config/type_stub.py),
declares them on this class, the base of ``RunConfigBase``, so that the methods of RunConfig's
bases type-check against them.
"""


class RunConfigFields:
    """RunConfig's fields, as fields.pyi declares them; no attribute at run time."""
