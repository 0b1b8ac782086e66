"""Pure DataFrame -> DataFrame transformations, shared by streaming and batch drivers."""
