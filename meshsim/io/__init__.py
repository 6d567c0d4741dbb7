"""Write: run-folder files and tables (``records``) and run folders that cannot mix (``runfolder``)."""
