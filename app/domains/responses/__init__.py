"""Background Responses, flex processing and the single-requests list: one lane, one folder."""
