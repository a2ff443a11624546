"""Services (actions) and selectors (reads) that the console and the API call; views hold no logic."""
