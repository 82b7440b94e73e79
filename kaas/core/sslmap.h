/*
 * sslmap.h — ssl.principal.mapping.rules (KIP-371): from a TLS client
 * certificate's distinguished name (RFC 2253, as Java's
 * X500Principal.getName() writes it) to the name of its User: principal.
 *
 * The syntax is Kafka's: a comma-separated list of
 *   RULE:pattern/replacement/      RULE:pattern/replacement/L (or /U)
 *   DEFAULT
 * tried in order; the first rule whose pattern matches the whole DN gives
 * the name (every match of the pattern in the DN replaced, as Java's
 * String.replaceAll does, then lower- or upper-cased); DEFAULT gives the
 * DN itself.  The patterns are Java regular expressions, run by PCRE2
 * (its syntax is Java's for what mapping rules use: classes, groups,
 * lazy quantifiers, \w, \d, escapes).  The replacement is Java's: $N and
 * ${name} name groups, \x is x; a $N past the pattern's groups is the text
 * $N, as Kafka's SslPrincipalMapper leaves it.
 */
#ifndef KAAS_CORE_SSLMAP_H
#define KAAS_CORE_SSLMAP_H

#include <stddef.h>

typedef struct kb_sslmap kb_sslmap;

/* Parses and compiles the rules.  0 and *out, or -EINVAL with the rule at
 * fault and why in err (a rule the syntax refuses, a pattern that does not
 * compile, a replacement that names no group of its pattern, no rule at
 * all); -ENOMEM.  out may be NULL: only check. */
int kb_sslmap_parse(const char *rules, kb_sslmap **out, char *err, size_t errlen);

/* The name the rules give dn, into out.  0; -ENOENT when no rule applies
 * (Kafka refuses the client then); -ENAMETOOLONG when it does not fit;
 * -EIO when the regular expression engine gives up (a match limit). */
int kb_sslmap_apply(const kb_sslmap *m, const char *dn, char *out, size_t outlen);

/* The rules, one a line, as Kafka's Rule.toString() writes them (tests, logs). */
int kb_sslmap_describe(const kb_sslmap *m, char *out, size_t outlen);

void kb_sslmap_free(kb_sslmap *m); /* NULL-safe */

#endif
