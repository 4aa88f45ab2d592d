import os
import sys

# helpers shared between test modules (tests/pm_tiny.py) import by name under --import-mode=importlib
sys.path.insert(0, os.path.dirname(__file__))
