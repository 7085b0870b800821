// SecurityClient: one protocol to send a request to the engine, embedded in-process or over the localauthd socket.
