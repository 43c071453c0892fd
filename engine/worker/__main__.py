from engine.worker.main import main

main()
