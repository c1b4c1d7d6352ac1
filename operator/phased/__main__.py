import sys

from phased.cli import main

sys.exit(main())
