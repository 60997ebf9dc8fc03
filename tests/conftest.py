import os
import sys

# tests import the oracle module ``reference`` from this folder
sys.path.insert(0, os.path.dirname(__file__))
