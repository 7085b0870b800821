import Foundation

/// Whether this machine lets unprivileged programs make user namespaces, as the kernel's settings say. Inside one, a
/// program of the user holds capabilities (`CAP_SYS_ADMIN` for its own mounts, `CAP_CHECKPOINT_RESTORE` for its own
/// memory map's executable) that the identity attacks need; where the kernel refuses them, those attacks cannot
/// happen. `lactl status` and localauthd's start say which it is.
package enum UserNamespacePolicy: Sendable, Equatable {
    /// Allowed: localauthd's checks, not the kernel, stand between such a program and another app's identity.
    case allowed
    /// Refused to unprivileged programs, by the named setting.
    case refused(setting: String)
    /// Allowed only to programs an AppArmor profile allows (Ubuntu's restriction).
    case restrictedByAppArmor

    /// The policy the settings under `procSys` (normally `/proc/sys`) describe.
    package static func current(procSys: String = "/proc/sys") -> UserNamespacePolicy {
        func setting(_ path: String) -> String? {
            (try? String(contentsOfFile: procSys + "/" + path, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if setting("user/max_user_namespaces") == "0" { return .refused(setting: "user.max_user_namespaces=0") }
        // Debian's and Ubuntu's kernels' own switch.
        if setting("kernel/unprivileged_userns_clone") == "0" {
            return .refused(setting: "kernel.unprivileged_userns_clone=0")
        }
        if setting("kernel/apparmor_restrict_unprivileged_userns") == "1" { return .restrictedByAppArmor }
        return .allowed
    }

    /// One line for people: what the setting is and what follows for caller identity.
    package var summary: String {
        switch self {
        case .allowed:
            return "allowed to unprivileged programs (inside one a program of the user holds capabilities over its own"
                + " mounts and memory map: localauthd's identity checks, not the kernel, refuse what it tries there)"
        case .refused(let setting):
            return "refused to unprivileged programs (\(setting)): the identity attacks made through them cannot"
                + " happen here"
        case .restrictedByAppArmor:
            return "allowed only to programs AppArmor lets have them (kernel.apparmor_restrict_unprivileged_userns=1)"
        }
    }
}
