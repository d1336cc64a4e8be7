import sys

from planner.app.cli import main

sys.exit(main())
