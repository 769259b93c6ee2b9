"""The figure readings of the README and the docs site, recomputed from the committed tables.

    uv run python benchmarks/readme_readings.py           # check (make test runs it)
    uv run python benchmarks/readme_readings.py --write   # rewrite the blocks

The renderer and its checks are the library module ``balancebench.readme_readings`` (its
docstring says what a reading is), which ``tests/test_readme_readings.py`` runs too.
"""

from balancebench.readme_readings import main

if __name__ == "__main__":
    main()
