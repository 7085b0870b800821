// Authenticators: passcodes through PAM, fingerprints through libfprint-2, and the attempt policy. Built in the authentication issue.
