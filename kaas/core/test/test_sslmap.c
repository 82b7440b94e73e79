/* test_sslmap.c — ssl.principal.mapping.rules (acl_sslmap.c) against the
 * examples of KIP-371, Kafka's security documentation and Kafka's own
 * SslPrincipalMapperTest (valid and invalid rules, how a list splits, the
 * mapping of sample DNs), plus Java's replaceAll semantics and the
 * refusals kaas adds at start-up. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kaas/core/sslmap.h"
#include "util/test/ktest.h"

static void valid(const char *rules)
{
	char err[512] = "";
	int rc = kb_sslmap_parse(rules, NULL, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s: refused: %s", rules, err);
}

static void invalid(const char *rules, const char *want)
{
	char err[512] = "";
	int rc = kb_sslmap_parse(rules, NULL, err, sizeof(err));
	ck_assert_msg(rc == -EINVAL, "%s: accepted (%d)", rules, rc);
	ck_assert_msg(strstr(err, want), "%s: error '%s' lacks '%s'", rules, err, want);
}

static void splits(const char *want, const char *rules)
{
	kb_sslmap *m = NULL;
	char err[512] = "", got[1024];
	ck_assert_msg(kb_sslmap_parse(rules, &m, err, sizeof(err)) == 0, "%s: %s", rules, err);
	ck_assert_int_eq(kb_sslmap_describe(m, got, sizeof(got)), 0);
	ck_assert_msg(strcmp(got, want) == 0, "'%s' split as %s, Kafka: %s", rules, got, want);
	kb_sslmap_free(m);
}

static void maps(const kb_sslmap *m, const char *dn, const char *want)
{
	char got[512];
	int rc = kb_sslmap_apply(m, dn, got, sizeof(got));
	ck_assert_msg(rc == 0, "%s: %d", dn, rc);
	ck_assert_msg(strcmp(got, want) == 0, "%s -> '%s', want '%s'", dn, got, want);
}

static kb_sslmap *mk(const char *rules)
{
	kb_sslmap *m = NULL;
	char err[512] = "";
	ck_assert_msg(kb_sslmap_parse(rules, &m, err, sizeof(err)) == 0, "%s: %s", rules, err);
	return m;
}

/* SslPrincipalMapperTest.testValidRules */
START_TEST(kafka_valid_rules)
{
	valid("DEFAULT");
	valid("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/");
	valid("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT");
	valid("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/");
	valid("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L");
	valid("RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U");
	valid("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/");
	valid("RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/");
}
END_TEST

/* SslPrincipalMapperTest.testInvalidRules; each refusal names the rule. */
START_TEST(kafka_invalid_rules)
{
	invalid("default", "invalid rule 'default'");
	invalid("DEFAUL", "invalid rule 'DEFAUL'");
	invalid("DEFAULT/L", "invalid rule 'DEFAULT/L' (unmatched '/L'");
	invalid("DEFAULT/U", "invalid rule 'DEFAULT/U'");
	/* no pattern/replacement/: the list splits at the comma, as Kafka splits it */
	invalid("RULE:CN=(.*?),OU=ServiceUsers.*/$1", "invalid rule 'RULE:CN=(.*?)'");
	invalid("rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "invalid rule 'rule:");
	invalid("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "unmatched '/U'");
	invalid("RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "invalid rule");
	invalid("RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "invalid rule");
	invalid("RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "invalid rule 'RULE:^CN=(.*?)'");
	/* the bad one named in a list of good ones */
	invalid("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:x/y/Q, DEFAULT", "invalid rule 'RULE:x/y/Q'");
}
END_TEST

/* SslPrincipalMapperTest.testRulesSplitting: toString of the parsed list. */
START_TEST(kafka_rules_splitting)
{
	splits("[DEFAULT]", "DEFAULT");
	splits("[RULE:/]", "RULE://");
	splits("[RULE:/.*]", "RULE:/.*/");
	splits("[RULE:/.*/L]", "RULE:/.*/L");
	splits("[RULE:/, DEFAULT]", "RULE://,DEFAULT");
	splits("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  ");
	splits("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  ");
	splits("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  ");
	splits("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
	       "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ");
	/* empty entries are skipped */
	splits("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,");
	splits("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   ");
	splits("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,");
	/* escape sequences stay in the pattern and the replacement */
	splits("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//");
	splits("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/");
	/* commas and RULE: inside patterns */
	splits("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
	       "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT");
	/* Kafka accepts an empty list and then refuses every certificate:
	 * kaas refuses the setting instead. */
	invalid("", "no rule");
	invalid(",   , , ,      , , ,   ", "no rule");
}
END_TEST

/* SslPrincipalMapperTest.testSslPrincipalMapper and testCommaWithWhitespace */
START_TEST(kafka_mapper)
{
	kb_sslmap *m = mk("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
			  "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
			  "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, "
			  "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, "
			  "DEFAULT");
	maps(m, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke");
	maps(m, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme");
	maps(m, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME");
	maps(m, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE");
	maps(m, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US");
	kb_sslmap_free(m);
	m = mk("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT");
	maps(m, "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz", "Tkac\\, Adam");
	kb_sslmap_free(m);
}
END_TEST

/* The example of Kafka's security documentation (and KIP-371). */
START_TEST(kafka_docs_example)
{
	kb_sslmap *m = mk("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n"
			  "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\n"
			  "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\n"
			  "DEFAULT");
	maps(m, "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser");
	maps(m, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin");
	/* kaas's own DN form (last RDN first): the third rule */
	maps(m, "O=kaas-test,CN=alice", "alice");
	maps(m, "O=kaas-test", "O=kaas-test"); /* DEFAULT: the whole DN */
	kb_sslmap_free(m);
}
END_TEST

/* The first rule that matches the whole DN wins; without DEFAULT a DN no
 * rule matches gets -ENOENT (Kafka refuses the client). */
START_TEST(first_match_and_no_match)
{
	kb_sslmap *m = mk("RULE:^CN=([a-z]+),O=a$/first-$1/, RULE:^CN=([a-z]+),.*$/second-$1/");
	maps(m, "CN=bob,O=a", "first-bob");
	maps(m, "CN=bob,O=b", "second-bob");
	char out[64];
	/* matches a part, not the whole: no rule applies */
	ck_assert_int_eq(kb_sslmap_apply(m, "O=x,CN=bob,O=a", out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(kb_sslmap_apply(m, "CN=bob,O=a", out, 4), -ENAMETOOLONG);
	kb_sslmap_free(m);
}
END_TEST

/* What Java's String.replaceAll and Matcher.appendReplacement do. */
START_TEST(java_replacement)
{
	/* every match, an empty one at the end too: "abc".replaceAll("(.*)", "x$1") */
	kb_sslmap *m = mk("RULE:(.*)/x$1/");
	maps(m, "abc", "xabcx");
	kb_sslmap_free(m);
	m = mk("RULE:^CN=(\\w+).*$/$1-$5-\\$-$0/");
	maps(m, "CN=alice,O=x", "alice-$5-$-CN=alice,O=x"); /* $5 past the groups: text */
	kb_sslmap_free(m);
	m = mk("RULE:^CN=(?<user>\\w+),O=(\\w+)$/${user}@$2$21/U");
	maps(m, "CN=alice,O=corp", "ALICE@CORPCORP1"); /* $21: group 2, then 1 */
	kb_sslmap_free(m);
	m = mk("RULE:^CN=(x)?(\\w+)$/[$1]$2/");
	maps(m, "CN=alice", "[]alice"); /* a group that took no part: nothing */
	kb_sslmap_free(m);
	m = mk("RULE:^CN=(.*)$/$1/L");
	maps(m, "CN=Zoë", "zoë"); /* UTF-8 kept whole */
	kb_sslmap_free(m);
}
END_TEST

/* What Kafka would refuse only when a client connects, refused here. */
START_TEST(refused_at_start)
{
	invalid("RULE:^CN=.*$/$1/", "the pattern has no group");
	invalid("RULE:^CN=(.*)$/$/", "a '$' in the replacement");
	invalid("RULE:^CN=(.*)$/${nope}/", "${nope}");
	invalid("RULE:^CN=(.*$/$1/, DEFAULT", "invalid rule 'RULE:^CN=(.*$/$1/' (the pattern does not compile");
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "sslmap", .timeout = 30},
			  KTEST_LIST(kafka_valid_rules, kafka_invalid_rules, kafka_rules_splitting, kafka_mapper,
				     kafka_docs_example, first_match_and_no_match, java_replacement, refused_at_start));
}
