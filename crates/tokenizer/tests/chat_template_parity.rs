//! Chat templates rendered byte-identically to transformers' `apply_chat_template(tokenize=False)`.

mod common;

use serde_json::{json, Value};
use torchnative_formats::gguf::GgufFile;
use torchnative_tokenizer::{
    ChatMessage, ChatTemplate, ChatTemplateOptions, ChatTemplateTokens, Tokenizer,
};

/// Our own test template: validation with raise_exception, loop.first/last, namespace, Python
/// string methods, a system prompt pulled out of the list, and bos/eos tokens.
const STRICT_TEMPLATE: &str = r#"{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
  {%- set system = messages[0]['content'].strip() -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system = '' -%}
  {%- set turns = messages -%}
{%- endif -%}
{%- set ns = namespace(count=0) -%}
{%- for message in turns -%}
  {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
    {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
  {%- endif -%}
  {%- set ns.count = ns.count + 1 -%}
  {%- if message['role'] == 'user' -%}
[INST] {% if loop.first and system %}<<SYS>>
{{ system }}
<</SYS>>

{% endif %}{{ message['content'].strip() }} [/INST]
  {%- else -%}
 {% generation %}{{ message['content'] | trim }}{{ eos_token }}{% endgeneration %}
  {%- endif -%}
  {%- if loop.last %}
<!-- {{ ns.count }} turns, last role {{ message.role.upper() }}, words {{ message.content.split() | length }} -->
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt %} [ASSISTANT]{% endif -%}"#;

/// Our own template leaning on `tojson` (default and with indent), dict literals, `.items()`,
/// `.startswith()`, loop controls, `is defined` / `is none` and an extra variable.
const JSON_TEMPLATE: &str = r#"{%- for message in messages %}
{%- if message.content.startswith('#') %}{% continue %}{% endif %}
<|{{ message.role }}|>{{ {"role": message.role, "chars": message.content | length, "ratio": 0.5, "ok": true, "none": none} | tojson }}
{{ message.content | tojson }}
{%- for key, value in {"b": 1, "a": [1.25, "x\ty"]}.items() %} {{ key }}={{ value | tojson }}{% endfor %}
{%- if loop.index >= 4 %}{% break %}{% endif %}
{% endfor %}
{{ messages | tojson(indent=2) }}
tools: {{ tools is none }} {{ tools is defined }} documents: {{ documents is none }}
{%- if tools %}
{%- for tool in tools %}
{{ tool | tojson }}
{{ tool.function.parameters | tojson(indent=4) }}
{%- endfor %}
{%- endif %}
thinking: {{ enable_thinking | default('unset') }}
{%- if add_generation_prompt %}
<|assistant|>
{%- endif %}"#;

/// Extra template variables, keys deliberately not sorted: tools print in this order.
const EXTRA_JSON: &str = r#"{"enable_thinking": false, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city, in °C", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}}]}"#;

fn conversations() -> Vec<Vec<ChatMessage>> {
    let m = ChatMessage::new;
    vec![
        vec![m("user", "Hello!")],
        vec![m("system", "  You are terse.  "), m("user", "What is 2+2?")],
        vec![
            m("system", "You are a helpful assistant."),
            m("user", "Hi"),
            m("assistant", "Hello! How can I help?"),
            m("user", "Tell me a joke about Rust 🦀 and 日本語."),
        ],
        vec![
            m("user", "  spaced  out  "),
            m("assistant", "ok\n\n"),
            m("user", "# hidden"),
            m("user", "tabs\tand \"quotes\" and \\ backslash"),
        ],
        // Template syntax inside content is data, never executed.
        vec![
            m(
                "user",
                "{{ raise_exception('injected') }} {% for x in y %} {# c #} <|im_end|>",
            ),
            m("assistant", "'single' \"double\" \u{0}\u{1b} \u{2028}é"),
        ],
        // Not alternating: the strict template raises.
        vec![m("user", "one"), m("user", "two")],
    ]
}

fn message_json(conversation: &[ChatMessage]) -> Value {
    Value::Array(
        conversation
            .iter()
            .map(|m| json!({"role": m.role, "content": m.content}))
            .collect(),
    )
}

#[test]
fn chat_templates_match_transformers() {
    let Some((model, python)) = common::model_and_oracle() else {
        return;
    };
    // (An empty conversation is left out: transformers rejects it before rendering.)
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&model).unwrap()).unwrap();
    let smollm_template = tokenizer
        .chat_template()
        .expect("the default model ships a template")
        .to_string();
    let convs = conversations();
    let templates = [
        ("smollm", smollm_template.as_str()),
        ("strict", STRICT_TEMPLATE),
        ("json", JSON_TEMPLATE),
    ];
    let work = common::temp_dir("chat");
    let jobs: Vec<Value> = templates
        .iter()
        .map(|(name, template)| {
            json!({
                "kind": "chat",
                "gguf_dir": model.parent().unwrap(),
                "gguf_file": model.file_name().and_then(|n| n.to_str()).unwrap(),
                "template": template,
                "conversations": convs.iter().map(|c| message_json(c)).collect::<Vec<_>>(),
                // Sent as text so Python sees the keys in written order.
                "extra_json": if *name == "json" { EXTRA_JSON } else { "{}" },
            })
        })
        .collect();
    let results = common::run_oracle(&python, &Value::Array(jobs), &work);

    let mut compared = 0;
    let mut raised = 0;
    for ((name, source), result) in templates.iter().zip(&results) {
        let tokens = ChatTemplateTokens {
            bos_token: tokenizer.bos_token().map(str::to_string),
            eos_token: tokenizer.eos_token().map(str::to_string),
            unk_token: tokenizer.unk_token().map(str::to_string),
            pad_token: tokenizer.pad_token().map(str::to_string),
        };
        assert_eq!(tokens.bos_token.as_deref(), result["bos_token"].as_str());
        assert_eq!(tokens.eos_token.as_deref(), result["eos_token"].as_str());
        let template = ChatTemplate::new(source, tokens).unwrap();
        for (conversation, expected) in convs.iter().zip(result["renders"].as_array().unwrap()) {
            for add_generation_prompt in [false, true] {
                let mut options = ChatTemplateOptions {
                    add_generation_prompt,
                    ..Default::default()
                };
                if *name == "json" {
                    options.extra_variables_json = Some(EXTRA_JSON.to_string());
                }
                let reference = &expected[format!("gen{}", u8::from(add_generation_prompt))];
                let ours = template.render(conversation, &options);
                match (reference.as_str(), ours) {
                    (Some(text), Ok(rendered)) => {
                        assert_eq!(rendered, text, "{name} template on {conversation:?}")
                    }
                    (None, Err(err)) => {
                        // raise_exception raises a plain TemplateError carrying the template's
                        // message; other failures (e.g. indexing an empty list) only need to fail.
                        let message = reference["error"].as_str().expect("oracle error message");
                        if reference["type"] == "TemplateError" {
                            assert!(
                                err.to_string().contains(message),
                                "{name}: ours {err} vs transformers {message}"
                            );
                            raised += 1;
                        }
                    }
                    (text, ours) => {
                        panic!("{name} on {conversation:?}: transformers {text:?} vs ours {ours:?}")
                    }
                }
                compared += 1;
            }
        }
    }
    assert_eq!(compared, templates.len() * convs.len() * 2);
    assert!(
        raised >= 2,
        "the strict template's raise_exception was exercised"
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn tokenizer_template_renders_smollm_prompt() {
    let Some(model) = common::default_model() else {
        return;
    };
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&model).unwrap()).unwrap();
    let template = ChatTemplate::from_tokenizer(&tokenizer)
        .expect("template present")
        .unwrap();
    let prompt = template
        .render(
            &[ChatMessage::new("user", "Hi")],
            &ChatTemplateOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
        )
        .unwrap();
    // The rendered prompt's special tokens encode to their single ids.
    let ids = tokenizer.encode(&prompt, Default::default()).unwrap();
    assert_eq!(ids.first(), tokenizer.token_id("<|im_start|>").as_ref());
    assert!(prompt.ends_with("<|im_start|>assistant\n"), "{prompt:?}");
}
