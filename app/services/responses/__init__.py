"""Background Responses over the batch machinery."""
