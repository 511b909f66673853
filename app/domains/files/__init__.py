"""Files and the Uploads API: stored bytes, their validation hand-off and expiry."""
