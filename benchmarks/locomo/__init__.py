"""Evidence recall of the context compiler on the LoCoMo conversations (the dataset is not
shipped), and the cross-validation that chose the dialogue profile's constants."""
