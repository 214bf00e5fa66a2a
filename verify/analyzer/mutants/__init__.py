# The kill table: planted violations the analyzer must reject (kill_table.py; run: mutants.py).
