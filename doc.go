package tickbus
