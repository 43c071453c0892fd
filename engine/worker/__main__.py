import atexit
import os
import sys

from engine.worker.main import main

main()
# A normal interpreter exit tears TensorFlow down for 1.3-1.6 s (module teardown, its static
# destructors; torch's takes less), and the parent waits for the exit before the next round
# starts. Everything the worker owes has been sent by now; what must still happen at exit
# (atexit's handlers: logging's flush, temporary folders' finalizers) runs here, then the
# process ends at once, as a forked worker does (engine/worker/zygote.py). A failure raises
# out of main() above and exits the usual way, with its traceback and code.
atexit._run_exitfuncs()
for stream in (sys.stdout, sys.stderr):
    stream.flush()
os._exit(0)
