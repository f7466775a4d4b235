"""The errors the provider raises: each names what failed and carries netprobe's own words."""


class NetprobeError(RuntimeError):
    """A netprobe verb failed.

    Attributes: ``verb`` (e.g. ``"snapshot"``), ``exit_code`` (netprobe's exit code: 1 a gate
    failed, 2 usage, 3 host refused, 4 a phase could not run; -N killed by signal N), ``message``
    (netprobe's standard error, stripped), ``argv`` (the command run).
    """

    def __init__(self, verb, exit_code, message, argv):
        self.verb = verb
        self.exit_code = exit_code
        self.message = message
        self.argv = list(argv)
        super().__init__(
            "netprobe slot %s failed with exit code %s: %s" % (verb, exit_code, message)
        )


class SlotPathError(ValueError):
    """A "path to VM" that is not a slot folder ``<state dir>/slot-<N>``."""
