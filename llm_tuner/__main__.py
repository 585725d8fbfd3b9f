from llm_tuner.app import main

raise SystemExit(main())
