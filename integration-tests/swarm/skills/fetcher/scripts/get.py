"""Prints the status of a GET of argv[1], or why it was refused."""
import sys
import urllib.request

try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        print("status", r.status)
except Exception as e:  # the refusal is the result
    print("refused:", type(e).__name__, e)
