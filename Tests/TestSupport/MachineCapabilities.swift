import Foundation
import Testing

/// What some machines refuse a test: each is found out once, with the very call the tests make, so a test that needs
/// it is skipped with its reason instead of reading a failed setup as the daemon's answer.
package enum MachineCapability {
    /// `unshare -Urm`: a user namespace with a mount namespace inside, as the identity attacks make one. Refused in
    /// a chroot, with `kernel.unprivileged_userns_clone=0` or `user.max_user_namespaces=0`, under Ubuntu's AppArmor
    /// restriction and in many containers.
    package static let userNamespaces: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        return (try? runCapturingOutput(URL(fileURLWithPath: "/usr/bin/unshare"), ["-Urm", "/bin/true"]).status) == 0
    }()

    /// Why a test that needs user namespaces does not run here.
    package static let userNamespacesRefused: Comment =
        "this machine refuses user namespaces (unshare -Urm failed): the attacks made through one cannot happen here"
}

extension Trait where Self == ConditionTrait {
    /// Runs the test only where `unshare -Urm` works; elsewhere it is skipped, saying that the attack it makes is
    /// impossible on this machine.
    package static var needsUserNamespaces: Self {
        .enabled(if: MachineCapability.userNamespaces, MachineCapability.userNamespacesRefused)
    }
}

/// Says, in the test's output, that part of a test did not run here and why (`make test` lists these with the
/// skipped tests at the end of a pass).
package func skipPart(_ what: String, because reason: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
    print("◇ Part skipped: \(what) (\(sourceLocation.fileName):\(sourceLocation.line)): \(reason)")
}
