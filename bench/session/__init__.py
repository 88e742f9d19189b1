"""The session layer: plan, check, launch, resume, read and report a grid from typed requests,
with no command line. ``bench`` and a notebook call the same functions; each command only
parses its flags into a request and prints what comes back.

The public functions are exported at the top of the package (``debias_bench.run``,
``results``, ``report``, ``compare``, ``status``); they raise the
:class:`~debias_bench.errors.BenchError` subclasses ``bench`` prints as one ``error:`` line, and
never exit the interpreter.
"""
