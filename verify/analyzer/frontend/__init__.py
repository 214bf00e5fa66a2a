# The front end: reads the artifacts (PTX, LLVM IR) into the program forms the layers above use.
