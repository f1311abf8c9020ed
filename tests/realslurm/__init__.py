"""A real single-host Slurm cluster for the tests (see :mod:`tests.realslurm.cluster`)."""
