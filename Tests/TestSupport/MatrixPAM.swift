import Foundation

/// PAM through pam_matrix (libpam-wrapper): a service file and a password file in a directory, used with
/// `pam_start_confdir`, so tests check real PAM transactions without touching the system's accounts.
package enum MatrixPAM {
    /// The module, as Debian installs it.
    package static let module = "/usr/lib/x86_64-linux-gnu/pam_wrapper/pam_matrix.so"

    /// Writes `directory/passdb` with `users` (name, password) allowed for `service`, and the service file
    /// `directory/service` (auth and account through pam_matrix). No blank lines: pam_matrix crashes on them.
    package static func writeService(
        _ service: String, in directory: String, users: [(name: String, password: String)]
    ) throws {
        let passdb = directory + "/passdb"
        try users.map { "\($0.name):\($0.password):\(service)\n" }.joined()
            .write(toFile: passdb, atomically: true, encoding: .utf8)
        try """
        auth     required  \(module) passdb=\(passdb)
        account  required  \(module) passdb=\(passdb)

        """.write(toFile: directory + "/" + service, atomically: true, encoding: .utf8)
    }
}
