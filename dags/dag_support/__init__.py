"""What the DAG files share, Airflow-only: the library's Param specs as Airflow ``Param``s
(``params``), the settings the DAG files read from the environment (``settings``) and the
checks their closing tasks share (``steps``).

It lives beside the DAG files because only they use it (Airflow puts ``dags/`` on
``sys.path``; ``dags/.airflowignore`` keeps the DAG processor from parsing it as DAGs);
``plugins/`` holds Airflow plugins alone.
"""
